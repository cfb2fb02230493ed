//! The RoPE panel of the explorer (`rope=on`): for the chosen layer, every rotating pair's wavelength
//! (tokens per full turn, `2π / θ_j`) on a log axis, the pairs that do not rotate marked, and the
//! layer's theta, rotary fraction and scaling named. The angles are [`crate::attention::rope`]'s.

use crate::attention::layer_inputs::LayerLayout;
use crate::attention::rope::Rotary;
use crate::model::plot::{Axis, Scale, short_tokens_label};
use crate::model::units::format_thousands;
use crate::model::{LayerKind, Model, Positional};
use crate::views::chart::{LineChartData, RefLine, Series};
use crate::views::kv::breakdown::kind_name;

/// The positional figures of one layer that uses RoPE.
#[derive(Clone, Debug, PartialEq)]
pub struct RopeFigures {
    pub layer: u32,
    pub kind: LayerKind,
    pub theta: f64,
    pub partial_rotary_factor: f64,
    pub proportional: bool,
    pub linear_factor: f64,
    /// The rotation itself: head width, pairing and each pair's frequency.
    pub rotary: Rotary,
}

impl RopeFigures {
    /// Pairs in the head (`d / 2`), turning or not.
    pub fn head_pairs(&self) -> usize {
        self.rotary.head_dim / 2
    }

    /// How fast pair `j` turns, written out: `θj = 500,000^(−2j/128), j = 0 … 63`.
    pub fn formula(&self) -> String {
        let span = if self.proportional { self.rotary.head_dim } else { self.rotary.rotary_dims() };
        let scaled = if self.linear_factor != 1.0 { format!(" / {}", self.linear_factor) } else { String::new() };
        let last = self.rotary.inv_freq.len().saturating_sub(1);
        format!("θj = {}^(−2j/{span}){scaled} radians per token, j = 0 … {last}", theta_text(self.theta))
    }

    /// Tokens for one turn of the fastest pair.
    pub fn shortest_wavelength(&self) -> f64 {
        self.rotary.wavelengths().first().copied().unwrap_or(f64::INFINITY)
    }

    /// Tokens for one turn of the slowest rotating pair.
    pub fn longest_wavelength(&self) -> f64 {
        self.rotary.wavelengths().last().copied().unwrap_or(f64::INFINITY)
    }
}

/// The RoPE figures of `layer` (as the explorer lays it out: MLA's decoupled RoPE key is the rotating
/// part of its head); `None` when the layer has no RoPE or nothing rotates.
pub fn rope_figures(model: &Model, layer: u32) -> Option<RopeFigures> {
    let layout = LayerLayout::of(model, layer);
    let Positional::Rope { theta, partial_rotary_factor, proportional, linear_factor } = layout.positional else {
        return None;
    };
    if !layout.kind.is_attention() {
        return None;
    }
    let rotary = Rotary::of(layout.head_dim as usize, layout.positional)?;
    (!rotary.inv_freq.is_empty()).then_some(RopeFigures {
        layer: layout.layer,
        kind: layout.kind,
        theta,
        partial_rotary_factor,
        proportional,
        linear_factor,
        rotary,
    })
}

/// A wavelength in tokens: two decimals below 100, whole tokens above.
pub fn wavelength_text(tokens: f64) -> String {
    if !tokens.is_finite() {
        "no turn".into()
    } else if tokens < 100.0 {
        format!("{tokens:.2} tokens")
    } else {
        format!("{} tokens", format_thousands(tokens.round() as u128))
    }
}

/// A theta as written in a config, with thousands separators when whole: `500,000`.
pub fn theta_text(theta: f64) -> String {
    if theta.fract() == 0.0 && (1.0..1e18).contains(&theta) {
        format_thousands(theta as u128)
    } else {
        format!("{theta}")
    }
}

/// What the panel shows: a heading, the layer's positions in words, and the chart when it rotates.
#[derive(Clone, Debug, PartialEq)]
pub struct RopePanel {
    pub heading: String,
    pub summary: String,
    pub figures: Option<RopeFigures>,
    pub chart: Option<LineChartData>,
}

pub fn rope_panel(model: &Model, layer: u32) -> RopePanel {
    let layout = LayerLayout::of(model, layer);
    let heading = format!("Positions in layer {} ({})", layout.layer, kind_name(layout.kind));
    let Some(f) = rope_figures(model, layer) else {
        let summary = match (layout.kind, layout.positional) {
            (LayerKind::Stateful(mixer), _) => format!(
                "No queries or keys here, so nothing rotates: a {} sees order through its recurrence, one token \
                 after another.",
                mixer.description()
            ),
            (LayerKind::FeedForward, _) => "A feed-forward-only layer mixes no tokens: each position is \
                                            transformed on its own, so positions do not enter it."
                .into(),
            (_, Positional::NoPe) => "No positional encoding (NoPE): no dimension of the head rotates. Order reaches \
                                 this layer only through the causal mask and what earlier layers wrote."
                .into(),
            (_, Positional::Alibi) => {
                "ALiBi, not RoPE: no dimension of the head rotates and nothing is added to Q or K. \
                                  Each head instead adds to its scores a bias that falls linearly with the \
                                  query-key distance, at a slope of its own. The heatmaps here are computed \
                                  without that bias (synthetic seeded weights, no bias term), so they show \
                                  none of the distance decay ALiBi gives."
                    .into()
            }
            (_, Positional::Rope { .. }) => "RoPE, but the rotary fraction leaves no whole pair to rotate.".into(),
            _ => format!(
                "Positions are added to the embeddings ({}) before the first layer: the heads do not rotate.",
                crate::views::describe::layer_positions_text(&layout)
            ),
        };
        return RopePanel { heading, summary, figures: None, chart: None };
    };
    RopePanel { heading, summary: summary(&f), chart: Some(chart(model, &f)), figures: Some(f) }
}

fn summary(f: &RopeFigures) -> String {
    let (d, r, pairs, turning) = (f.rotary.head_dim, f.rotary.rotary_dims(), f.head_pairs(), f.rotary.inv_freq.len());
    let dims = if r == d {
        format!("over all {d} dimensions of each head")
    } else {
        format!("over {r} of the {d} dimensions of each head ({:.0}%)", 100.0 * r as f64 / d as f64)
    };
    let style = if f.proportional {
        format!(
            ", proportional: the {turning} turning pairs are the fastest of a RoPE over the whole head, pair j \
             being dimensions j and j + {}",
            f.rotary.offset
        )
    } else if r < d {
        format!(", pair j being dimensions j and j + {}", f.rotary.offset)
    } else {
        String::new()
    };
    let scaled = if f.linear_factor != 1.0 {
        format!(
            " Positions are divided by {} (linear scaling), so every wavelength is that much longer.",
            f.linear_factor
        )
    } else {
        String::new()
    };
    let still = if turning < pairs {
        format!(
            " The other {} pairs ({} dimensions) do not rotate: they compare content alone, at any distance.",
            pairs - turning,
            d - r
        )
    } else {
        String::new()
    };
    format!(
        "RoPE θ = {} {dims}{style}. {turning} pairs turn, one full turn every {} (fastest) to {} (slowest).{scaled}{still}",
        theta_text(f.theta),
        wavelength_text(f.shortest_wavelength()),
        wavelength_text(f.longest_wavelength()),
    )
}

fn chart(model: &Model, f: &RopeFigures) -> LineChartData {
    let wavelengths = f.rotary.wavelengths();
    let points: Vec<(f64, f64)> = wavelengths.iter().enumerate().map(|(j, &w)| (j as f64, w)).collect();
    let context = model.max_position_embeddings;
    let mut h_lines = Vec::new();
    if context > 0 {
        let label = format!("context {} (max_position_embeddings)", short_tokens_label(context as f64));
        h_lines.push(RefLine { value: context as f64, label, class: "rope-context" });
    }
    match f.kind {
        LayerKind::Sliding { window_tokens: w } | LayerKind::Chunked { chunk_tokens: w } => {
            let noun = if matches!(f.kind, LayerKind::Sliding { .. }) { "window" } else { "chunk" };
            h_lines.push(RefLine {
                value: w as f64,
                label: format!("{noun} {}", short_tokens_label(w as f64)),
                class: "rope-window",
            });
        }
        LayerKind::Global | LayerKind::Stateful(_) | LayerKind::FeedForward => {}
    }
    let (turning, pairs) = (wavelengths.len(), f.head_pairs());
    let v_lines = if turning < pairs {
        let label = format!("pairs {turning} to {}: no rotation", pairs - 1);
        vec![RefLine { value: turning as f64 - 0.5, label, class: "rope-still" }]
    } else {
        Vec::new()
    };
    let top = h_lines.iter().map(|l| l.value).chain(wavelengths.iter().copied()).fold(1.0, f64::max);
    let bottom = wavelengths.iter().copied().fold(f64::INFINITY, f64::min);
    let y = Scale::new(Axis::Log, 10f64.powf(bottom.log10().floor()), 10f64.powf(top.log10().ceil()));
    let x = Scale::new(Axis::Linear, 0.0, (pairs.max(2) - 1) as f64);
    LineChartData {
        x_ticks: x.decimal_ticks(6).into_iter().map(|t| (t, format!("{t:.0}"))).collect(),
        y_ticks: y.decimal_ticks(8).into_iter().map(|t| (t, short_tokens_label(t))).collect(),
        x,
        y,
        series: vec![Series { label: "tokens per full turn, 2π / θⱼ".into(), class: "s0", points }],
        h_lines,
        v_lines,
        x_title: "dimension pair j (fastest first)".into(),
        y_title: "wavelength (tokens, log)".into(),
        description: format!(
            "Wavelengths of the {turning} rotating pairs of layer {} of {}, from {} to {}, on a log axis; {} of \
             {pairs} pairs rotate.",
            f.layer,
            model.name,
            wavelength_text(f.shortest_wavelength()),
            wavelength_text(f.longest_wavelength()),
            turning
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::presets::preset;
    use std::f64::consts::TAU;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn llama_3_8b_by_hand() {
        // θ = 500,000, d = 128, every dimension: 64 pairs at 500000^(-2j/128).
        let f = rope_figures(preset("llama-3-8b").unwrap(), 0).unwrap();
        assert_eq!((f.rotary.rotary_dims(), f.head_pairs(), f.rotary.offset), (128, 64, 64));
        // Fastest: j = 0 turns 1 radian per token, 2π = 6.2832 tokens per turn.
        assert!(close(f.shortest_wavelength(), TAU));
        // Slowest: j = 63, 2π × 500000^(126/128) = 2π × e^(0.984375 × ln 500000) = 2π × 407,308.6 = 2,559,196.
        assert!(close(f.longest_wavelength(), TAU * 500_000f64.powf(126.0 / 128.0)));
        assert!((f.longest_wavelength() - 2_559_196.0).abs() < 1.0, "{}", f.longest_wavelength());
        let panel = rope_panel(preset("llama-3-8b").unwrap(), 0);
        assert_eq!(
            panel.summary,
            "RoPE θ = 500,000 over all 128 dimensions of each head. 64 pairs turn, one full turn every 6.28 tokens \
             (fastest) to 2,559,196 tokens (slowest)."
        );
        assert_eq!(panel.figures.as_ref().unwrap().formula(), "θj = 500,000^(−2j/128) radians per token, j = 0 … 63");
        let chart = panel.chart.unwrap();
        assert_eq!(chart.series[0].points.len(), 64);
        assert!(chart.v_lines.is_empty());
        // The context line (8,192) and 10^0 to 10^7 on the log axis.
        assert_eq!(chart.h_lines[0].value, 8192.0);
        assert_eq!((chart.y.min, chart.y.max), (1.0, 1e7));
    }

    #[test]
    fn gemma_3_local_and_global_layers() {
        let g = preset("gemma-3-27b").unwrap();
        // Local layer 0: θ = 10,000, d = 128: slowest 2π × 10000^(126/128) = 2π × 8,659.6 = 54,410.
        let local = rope_figures(g, 0).unwrap();
        assert_eq!((local.theta, local.linear_factor), (10_000.0, 1.0));
        assert!((local.longest_wavelength() - TAU * 10_000f64.powf(126.0 / 128.0)).abs() < 1e-6);
        assert!((local.longest_wavelength() - 54_410.0).abs() < 1.0, "{}", local.longest_wavelength());
        // Global layer 5: θ = 1,000,000 and positions divided by 8: fastest 8 × 2π = 50.27 tokens,
        // slowest 8 × 2π × 1e6^(126/128) = 8 × 2π × 805,842.2 = 40,506,046.
        let global = rope_figures(g, 5).unwrap();
        assert_eq!((global.theta, global.linear_factor), (1e6, 8.0));
        assert!(close(global.shortest_wavelength(), 8.0 * TAU));
        assert!(close(global.longest_wavelength(), 8.0 * TAU * 1e6f64.powf(126.0 / 128.0)));
        assert!((global.longest_wavelength() - 40_506_046.0).abs() < 1.0, "{}", global.longest_wavelength());
        assert!(rope_panel(g, 5).summary.contains("Positions are divided by 8 (linear scaling)"));
        assert_eq!(global.formula(), "θj = 1,000,000^(−2j/128) / 8 radians per token, j = 0 … 63");
        // The sliding layer's chart marks its window.
        let chart = rope_panel(g, 0).chart.unwrap();
        assert!(chart.h_lines.iter().any(|l| l.value == 1024.0 && l.label == "window 1K"), "{:?}", chart.h_lines);
        assert_eq!(rope_panel(g, 0).heading, "Positions in layer 0 (sliding, window 1,024)");
    }

    #[test]
    fn gemma_4_global_layers_rotate_their_fastest_quarter() {
        // d = 512, a quarter rotates, proportional: 64 pairs (j, j + 256) at 1e6^(-2j/512).
        let g = preset("gemma-4-12b").unwrap();
        let f = rope_figures(g, 5).unwrap();
        assert_eq!((f.rotary.rotary_dims(), f.head_pairs(), f.rotary.offset), (128, 256, 256));
        // Slowest turning pair: 2π × 1e6^(126/512) = 2π × 10^1.4765625 = 2π × 29.9614 = 188.25 tokens.
        assert!((f.longest_wavelength() - 188.25).abs() < 0.01, "{}", f.longest_wavelength());
        let panel = rope_panel(g, 5);
        assert!(panel.summary.contains("over 128 of the 512 dimensions of each head (25%), proportional"));
        assert!(panel.summary.contains("The other 192 pairs (384 dimensions) do not rotate"), "{}", panel.summary);
        assert_eq!(f.formula(), "θj = 1,000,000^(−2j/512) radians per token, j = 0 … 63");
        let chart = panel.chart.unwrap();
        assert_eq!(chart.v_lines[0].label, "pairs 64 to 255: no rotation");
        // Its local layers: θ = 10,000 over all 256 dims.
        let local = rope_figures(g, 0).unwrap();
        assert_eq!((local.theta, local.rotary.rotary_dims()), (10_000.0, 256));
    }

    #[test]
    fn layers_without_rope_say_how_they_see_order() {
        // Llama 4's every 4th layer is global with no positions.
        let scout = preset("llama-4-scout").unwrap();
        assert!(rope_figures(scout, 3).is_none());
        let panel = rope_panel(scout, 3);
        assert!(panel.summary.starts_with("No positional encoding (NoPE)") && panel.chart.is_none());
        assert_eq!(panel.heading, "Positions in layer 3 (global)");
        assert!(rope_figures(scout, 2).is_some());
        assert!(rope_panel(preset("gpt2-small").unwrap(), 0).summary.starts_with("Positions are added"));
        // An ALiBi layer: the panel names ALiBi, not RoPE, and says the heatmaps lack its bias.
        let mut alibi = Model::simple(4, 256, 4);
        alibi.positional = Positional::Alibi;
        assert!(rope_figures(&alibi, 1).is_none());
        let panel = rope_panel(&alibi, 1);
        assert!(panel.summary.starts_with("ALiBi, not RoPE") && panel.chart.is_none(), "{}", panel.summary);
        assert!(panel.summary.contains("computed without that bias"), "{}", panel.summary);
        // DeepSeek-V3: the 64-dim decoupled RoPE key of each 192-dim head, θ = 10,000.
        // A Mamba layer has no queries or keys to rotate, whatever the model's positions say.
        let mut hybrid = Model::simple(4, 256, 4);
        let ssm = LayerKind::Stateful(crate::model::schedule::StateMixer::Ssm);
        hybrid.schedule = crate::model::schedule::Schedule::periodic(4, &[(1, ssm), (1, LayerKind::Global)]);
        assert!(rope_figures(&hybrid, 0).is_none() && rope_figures(&hybrid, 1).is_some());
        let panel = rope_panel(&hybrid, 0);
        assert_eq!(panel.heading, "Positions in layer 0 (state-space layer)");
        assert!(panel.summary.starts_with("No queries or keys here") && panel.chart.is_none(), "{}", panel.summary);
        let ds = rope_figures(preset("deepseek-v3").unwrap(), 0).unwrap();
        assert_eq!((ds.rotary.rotary_dims(), ds.rotary.head_dim), (64, 192));
        assert_eq!(
            (wavelength_text(TAU), wavelength_text(188.24), theta_text(1e6)),
            ("6.28 tokens".to_string(), "188 tokens".to_string(), "1,000,000".to_string())
        );
    }
}
