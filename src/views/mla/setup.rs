//! The layer the MLA view computes: the latent, RoPE and head widths of the chosen model when it has
//! MLA, else DeepSeek V3's (and the page says so), and whether the engine can take them.

use crate::catalog::presets::preset;
use crate::model::limits::KERNEL_MAX_HEAD_DIM;
use crate::model::{Mla, Model, Positional};
use crate::views::registry::Settings;

/// Widths of one MLA layer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MlaSizes {
    /// The model's query heads (the cost table counts them all).
    pub heads: u32,
    /// Latent rank r (`kv_lora_rank`).
    pub latent: u32,
    /// Width of the shared RoPE key and of each query's RoPE part (`qk_rope_head_dim`).
    pub rope: u32,
    /// Width of each head's key part decompressed from the latent (`qk_nope_head_dim`).
    pub nope: u32,
    /// Width of each head's value (`v_head_dim`).
    pub value: u32,
    /// RoPE's base.
    pub theta: f64,
}

impl MlaSizes {
    pub fn of(heads: u32, mla: Mla, theta: f64) -> Self {
        Self {
            heads,
            latent: mla.kv_lora_rank,
            rope: mla.qk_rope_head_dim,
            nope: mla.qk_nope_head_dim,
            value: mla.v_head_dim,
            theta,
        }
    }

    /// A head's query and key width in the expanded form: the decompressed part and the RoPE part.
    pub fn qk_width(&self) -> u32 {
        self.nope + self.rope
    }

    /// The one shared key head of the absorbed form: the latent and the RoPE key (576 for DeepSeek V3).
    pub fn latent_key_width(&self) -> u32 {
        self.latent + self.rope
    }

    /// Both forms scale scores by 1/√(the expanded head's width): folding changes where the product
    /// is taken, not what it is, so the absorbed form keeps that scale, not 1/√576.
    pub fn scale(&self) -> f64 {
        1.0 / f64::from(self.qk_width().max(1)).sqrt()
    }

    /// Why the engine cannot compute these widths here, if it cannot: every attention head must fit
    /// the kernels, and the rotating parts need pairs.
    pub fn refusal(&self) -> Option<String> {
        let widest = self.latent_key_width().max(self.qk_width()).max(self.value);
        if widest > KERNEL_MAX_HEAD_DIM {
            return Some(format!(
                "A head {widest} wide is more than the view computes (at most {KERNEL_MAX_HEAD_DIM}, the kernels' widest); \
                 the cost table below still counts it."
            ));
        }
        if !self.rope.is_multiple_of(2) || !self.qk_width().is_multiple_of(2) {
            return Some("RoPE turns pairs of values: an odd RoPE or head width cannot be rotated.".into());
        }
        None
    }
}

/// The layer the view computes and where its sizes came from.
#[derive(Clone, Debug, PartialEq)]
pub struct MlaSetup {
    pub sizes: MlaSizes,
    /// The model named on the page.
    pub model_name: String,
    /// Set when the chosen model has no MLA and DeepSeek V3's sizes are used instead.
    pub borrowed_note: Option<String>,
}

/// RoPE's base for `positional`, DeepSeek's 10,000 when the model has none.
fn theta_of(positional: &Positional) -> f64 {
    match positional {
        Positional::Rope { theta, .. } => *theta,
        _ => 10_000.0,
    }
}

/// The chosen model's MLA layer, or DeepSeek V3's when it has none.
pub fn setup(settings: &Settings) -> MlaSetup {
    let model = settings.resolved_model();
    if let Some(mla) = model.mla {
        let sizes = MlaSizes::of(model.n_q_heads, mla, theta_of(&model.positional));
        return MlaSetup { sizes, model_name: model.name.clone(), borrowed_note: None };
    }
    let deepseek: Option<&Model> = preset("deepseek-v3");
    let (heads, theta) = deepseek.map_or((128, 10_000.0), |m| (m.n_q_heads, theta_of(&m.positional)));
    MlaSetup {
        sizes: MlaSizes::of(heads, Mla::DEEPSEEK, theta),
        model_name: "DeepSeek-V3".into(),
        borrowed_note: Some(format!(
            "{} has no MLA layers: the view uses DeepSeek-V3's sizes. Choose DeepSeek-V2 or V3, or import a config \
             with kv_lora_rank, to compute another.",
            model.name
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deepseek_v3s_layer_and_a_model_without_mla() {
        let (settings, _) = Settings::from_query("model=deepseek-v3");
        let s = setup(&settings);
        assert_eq!(s.borrowed_note, None);
        assert_eq!(
            (s.sizes.heads, s.sizes.latent, s.sizes.rope, s.sizes.nope, s.sizes.value),
            (128, 512, 64, 128, 128)
        );
        // 512 + 64 = 576 one shared key; 128 + 64 = 192 per head; scale 1/√192.
        assert_eq!((s.sizes.latent_key_width(), s.sizes.qk_width()), (576, 192));
        assert_eq!(s.sizes.scale(), 1.0 / 192f64.sqrt());
        assert_eq!(s.sizes.refusal(), None);
        let (settings, _) = Settings::from_query("model=llama-3-8b");
        let s = setup(&settings);
        assert!(s.borrowed_note.as_deref().is_some_and(|n| n.starts_with("Llama")), "{s:?}");
        assert_eq!(s.sizes.latent_key_width(), 576);
    }

    #[test]
    fn widths_past_the_kernels_or_odd_ones_are_refused() {
        let wide = MlaSizes::of(4, Mla { kv_lora_rank: 1000, ..Mla::DEEPSEEK }, 1e4);
        assert!(wide.refusal().is_some_and(|r| r.contains("1064")));
        let odd = MlaSizes::of(4, Mla { qk_rope_head_dim: 3, ..Mla::DEEPSEEK }, 1e4);
        assert!(odd.refusal().is_some());
    }
}
