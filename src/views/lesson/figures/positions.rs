//! Figures of the chosen layer and of positions: its head geometry, its RoPE (theta, rotating
//! dimensions, scaling, wavelengths), the model's context limit, and the reach of the layers up to it.

use super::written::{Figure, Unit, number, whole};
use crate::model::Model;
use crate::model::reach::{Reach, stacked_reach};
use crate::views::heatmaps::rope::{rope_figures, theta_text, wavelength_text};
use crate::views::registry::Settings;

pub(super) fn figure(name: &str, state: &Settings, model: &Model) -> Option<Figure> {
    let layer = state.model.layer;
    let layout = || crate::attention::layer_inputs::LayerLayout::of(model, layer);
    let rope = || rope_figures(model, layer);
    Some(match name {
        "chosen_layer" => whole(layer.into(), Unit::Count),
        "layer_kv_heads" => whole(layout().n_kv_heads.into(), Unit::Count),
        "max_positions" => whole(model.max_position_embeddings.into(), Unit::Tokens),
        "rope_theta" => {
            let theta = rope()?.theta;
            Figure { text: theta_text(theta), ..number(theta, Unit::Number) }
        }
        "rotary_dims" => whole(rope()?.rotary.rotary_dims() as u128, Unit::Count),
        "rotary_fraction" => number(rope()?.partial_rotary_factor, Unit::Number),
        "rotary_pairs" => whole(rope()?.rotary.inv_freq.len() as u128, Unit::Count),
        "rope_linear_factor" => number(rope()?.linear_factor, Unit::Number),
        "rope_shortest_wavelength" => wavelength(rope()?.shortest_wavelength()),
        "rope_longest_wavelength" => wavelength(rope()?.longest_wavelength()),
        "stacked_layers" => whole(u128::from(layer) + 1, Unit::Count),
        "stacked_reach_tokens" => {
            let layers = model.schedule.layers();
            match stacked_reach(&layers[..(layer as usize + 1).min(layers.len())]) {
                Reach::Tokens(n) => whole(n.into(), Unit::Tokens),
                Reach::Everything | Reach::AtMost(_) => return None,
            }
        }
        _ => return None,
    })
}

fn wavelength(tokens: f64) -> Figure {
    Figure { text: wavelength_text(tokens), ..number(tokens, Unit::Number) }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{exact, text};

    #[test]
    fn rope_of_llama_3_8b_by_hand() {
        let q = "model=llama-3-8b";
        // θ = 500,000 over all 128 dims: 64 pairs. Fastest 2π = 6.2832 tokens; slowest
        // 2π × 500000^(126/128) = 2π × 407,308.617 = 2,559,195.517 tokens.
        assert_eq!(exact("rope_theta", q), "500000");
        assert_eq!(text("rope_theta", q), "500,000");
        assert_eq!((exact("rotary_dims", q), exact("rotary_pairs", q)), ("128".into(), "64".into()));
        assert_eq!(exact("rope_shortest_wavelength", q), "6.2832");
        assert_eq!(text("rope_shortest_wavelength", q), "6.28 tokens");
        assert_eq!(exact("rope_longest_wavelength", q), "2559195.5174");
        assert_eq!(text("rope_longest_wavelength", q), "2,559,196 tokens");
        assert_eq!(exact("rope_linear_factor", q), "1");
    }

    #[test]
    fn rope_of_gemma_local_and_global_layers() {
        // Gemma 3 27B: local θ 10,000 (slowest 2π × 10000^(126/128) = 54,410.14 tokens); global layer 5:
        // θ 1e6, positions ÷ 8: fastest 8 × 2π = 50.27, slowest 8 × 2π × 805,842.19 = 40,506,046 tokens.
        assert_eq!(exact("rope_theta", "model=gemma-3-27b&layer=0"), "10000");
        assert_eq!(text("rope_longest_wavelength", "model=gemma-3-27b&layer=0"), "54,410 tokens");
        let g = "model=gemma-3-27b&layer=5";
        assert_eq!((exact("rope_theta", g), exact("rope_linear_factor", g)), ("1000000".into(), "8".into()));
        assert_eq!(text("rope_shortest_wavelength", g), "50.27 tokens");
        assert_eq!(text("rope_longest_wavelength", g), "40,506,046 tokens");
        // Gemma 4 12B global layer 5: heads of 512, a quarter (128 dims, 64 pairs) turns, proportional:
        // slowest 2π × 1e6^(126/512) = 2π × 29.9614 = 188.2532 tokens.
        let g4 = "model=gemma-4-12b&layer=5";
        assert_eq!((exact("layer_head_dim", g4), exact("rotary_dims", g4)), ("512".into(), "128".into()));
        assert_eq!(exact("rotary_fraction", g4), "0.25");
        assert_eq!(exact("rope_longest_wavelength", g4), "188.2532");
        assert_eq!(exact("layer_head_dim", "model=gemma-4-12b&layer=0"), "256");
        // Its global layers have one KV head, its sliding ones 8; 262,144 positions (config.json).
        assert_eq!(
            (exact("layer_kv_heads", g4), exact("layer_kv_heads", "model=gemma-4-12b")),
            ("1".into(), "8".into())
        );
        assert_eq!(text("max_positions", g4), "262,144 tokens");
    }

    #[test]
    fn reach_by_hand() {
        // Gemma 3 27B, layer 4: five sliding layers of 1,024: 5 × 1,023 = 5,115 tokens.
        assert_eq!(exact("stacked_reach_tokens", "model=gemma-3-27b&layer=4"), "5115");
        assert_eq!(exact("stacked_layers", "model=gemma-3-27b&layer=4"), "5");
        assert_eq!(exact("chosen_layer", "model=gemma-3-27b&layer=4"), "4");
        // Mistral 7B, all 32 layers of 4,096: 32 × 4,095 = 131,040.
        assert_eq!(text("stacked_reach_tokens", "model=mistral-7b&layer=31"), "131,040 tokens");
    }

    #[test]
    fn figures_that_do_not_apply_are_none() {
        use super::super::figure;
        use super::super::tests::at;
        // Gemma 3's layer 5 is global: the reach is everything, not a number.
        let (state, model) = at("model=gemma-3-27b&layer=5");
        assert_eq!(figure("stacked_reach_tokens", &state, &model), None);
        // Llama 4 Scout's layer 3 has no positions (NoPE).
        let (state, model) = at("model=llama-4-scout&layer=3");
        assert_eq!(figure("rope_theta", &state, &model), None);
        assert_eq!(figure("rotary_dims", &state, &model), None);
    }
}
