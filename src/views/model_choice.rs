//! Which model the views show (`model`, a preset id, or `cfg`, an imported model in the compact
//! encoding) and which of its layers (`layer`), shared by the heatmaps, KV and compare views.

use super::link::{Accepted, LinkParams, Notice};
use crate::catalog::presets::{PRESET_IDS, preset};
use crate::model::Model;
use crate::model::encoding::decode_model;

pub const DEFAULT_MODEL: &str = "llama-3-8b";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelChoice {
    /// Preset id (URL `model=`), one of [`PRESET_IDS`]. Ignored while `cfg` holds a custom model.
    pub preset: String,
    /// A custom or imported model in the compact encoding of [`crate::model::encoding`] (URL `cfg=`).
    pub cfg: Option<String>,
    /// Layer index, 0-based (URL `layer=`), checked against the model by [`ModelChoice::check_layer`].
    pub layer: u32,
}

impl Default for ModelChoice {
    fn default() -> Self {
        Self { preset: DEFAULT_MODEL.to_string(), cfg: None, layer: 0 }
    }
}

impl ModelChoice {
    /// The model the views show: the custom `cfg` if there is one, else the preset.
    pub fn resolve(&self) -> Model {
        self.cfg
            .as_deref()
            .and_then(|c| decode_model(c).ok())
            .or_else(|| preset(&self.preset).cloned())
            .or_else(|| preset(DEFAULT_MODEL).cloned())
            .unwrap_or_else(|| Model::simple(32, 4096, 32))
    }

    /// Whether the views show the trained model (real weights) rather than a layout.
    pub fn is_trained(&self) -> bool {
        self.cfg.is_none() && self.preset == crate::catalog::presets::TRAINED_ID
    }

    /// A layer past the model's last one falls back to its [`default_layer`], with a notice.
    pub fn check_layer(&mut self, model: &Model) -> Option<Notice> {
        let layers = model.n_layers();
        (self.layer >= layers).then(|| {
            let fallback = default_layer(model);
            let notice = Notice(format!(
                "Ignored layer: {} is past the model's last layer ({}); using layer {fallback}.",
                self.layer,
                layers.saturating_sub(1)
            ));
            self.layer = fallback;
            notice
        })
    }
}

/// The layer a link without `layer` shows: the first that runs softmax attention, so a hybrid opens
/// on heatmaps rather than on a state-space layer (0 for a transformer, and for a model without any
/// attention layer).
pub fn default_layer(model: &Model) -> u32 {
    model.schedule.layers().iter().position(|k| k.is_attention()).unwrap_or(0) as u32
}

impl LinkParams for ModelChoice {
    const KEYS: &'static [&'static str] = &["model", "cfg", "layer"];

    fn set(&mut self, key: &str, value: &str) -> Result<Accepted, String> {
        match key {
            "model" if PRESET_IDS.contains(&value) => self.preset = value.to_string(),
            "model" => {
                return Err(format!(
                    "\"{value}\" is not a known model (try llama-3-8b, mistral-7b, gemma-3-27b, deepseek-v3...)"
                ));
            }
            "cfg" => match decode_model(value) {
                Ok(_) => self.cfg = Some(value.to_string()),
                Err(e) => return Err(format!("the model description could not be read ({e})")),
            },
            "layer" => self.layer = value.parse().map_err(|_| format!("\"{value}\" is not a layer number"))?,
            _ => return Err(format!("unknown parameter {key}")),
        }
        Ok(Accepted::Yes)
    }

    fn pairs(&self) -> Vec<(&'static str, String)> {
        let default = Self::default();
        let mut out = Vec::new();
        if self.preset != default.preset {
            out.push(("model", self.preset.clone()));
        }
        if let Some(cfg) = &self.cfg {
            out.push(("cfg", cfg.clone()));
        }
        if self.layer != default_layer(&self.resolve()) {
            out.push(("layer", self.layer.to_string()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::encoding::encode_model;
    use crate::views::link::round_trip;

    #[test]
    fn every_parameter_round_trips() {
        let choice =
            ModelChoice { preset: "gemma-3-27b".into(), cfg: Some(encode_model(&Model::simple(6, 512, 8))), layer: 5 };
        assert_eq!(round_trip(&choice), choice);
        assert!(ModelChoice::default().pairs().is_empty());
    }

    #[test]
    fn a_custom_model_wins_over_the_preset_and_bounds_the_layer() {
        let mut choice =
            ModelChoice { cfg: Some(encode_model(&Model::simple(6, 512, 8))), layer: 6, ..Default::default() };
        let model = choice.resolve();
        assert_eq!(model.n_layers(), 6);
        let notice = choice.check_layer(&model).unwrap();
        assert_eq!(notice.0, "Ignored layer: 6 is past the model's last layer (5); using layer 0.");
        assert_eq!(choice.layer, 0);
        assert_eq!(choice.check_layer(&model), None);
    }

    #[test]
    fn a_hybrid_defaults_to_its_first_attention_layer() {
        use crate::model::LayerKind;
        use crate::model::config::StateGeometry;
        use crate::model::schedule::{Schedule, StateMixer};
        let mut hybrid = Model::simple(8, 512, 8);
        let ssm = LayerKind::Stateful(StateMixer::Ssm);
        hybrid.schedule = Schedule::periodic(8, &[(4, ssm), (1, LayerKind::Global), (3, ssm)]);
        hybrid.states.ssm =
            Some(StateGeometry { conv_elements: 4, state_elements: 16, conv_bytes: 2, state_bytes: 4, params: 10 });
        assert_eq!(default_layer(&hybrid), 4);
        assert_eq!(default_layer(preset("llama-3-8b").unwrap()), 0);
        let mut choice = ModelChoice { cfg: Some(encode_model(&hybrid)), layer: 4, ..Default::default() };
        // The default layer goes without saying; layer 0, a Mamba layer, is written out.
        assert!(!choice.pairs().iter().any(|(k, _)| *k == "layer"));
        choice.layer = 0;
        assert!(choice.pairs().contains(&("layer", "0".to_string())));
        choice.layer = 8;
        let notice = choice.check_layer(&hybrid).unwrap();
        assert_eq!(notice.0, "Ignored layer: 8 is past the model's last layer (7); using layer 4.");
        assert_eq!(choice.layer, 4);
    }

    #[test]
    fn unknown_models_and_unreadable_configs_are_refused() {
        let mut choice = ModelChoice::default();
        assert!(choice.set("model", "gpt-9").is_err());
        assert!(choice.set("cfg", "<script>").is_err());
        assert!(choice.set("layer", "x").is_err());
        assert_eq!(choice, ModelChoice::default());
        assert_eq!(choice.resolve().name, preset(DEFAULT_MODEL).unwrap().name);
    }
}
